"""Training loops: the serial reference and the distributed full-batch algorithms."""
