"""Scripts that maintain files in the repository (``python -m tools.gen_tensor_stub``)."""
