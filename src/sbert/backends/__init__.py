"""Ways to run an encoder other than plain torch: ONNX Runtime (``onnx.py``)."""
