"""Where models come from and go to: base model sources, variant directories, presets, publishing."""
