"""Foundation: configuration, task instructions, errors, optional dependencies, devices."""
