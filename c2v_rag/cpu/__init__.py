"""CPU inference through ONNX Runtime: the exported decoder and encoder, and int8."""
