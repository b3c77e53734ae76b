# checkov loads external checks only from folders with an __init__.py.
