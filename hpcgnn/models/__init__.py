"""Models, parameter initialisation and counter-based randomness."""
