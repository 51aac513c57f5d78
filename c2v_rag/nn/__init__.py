"""The network's parts: attention modes, the projector, pooling and the readout."""
