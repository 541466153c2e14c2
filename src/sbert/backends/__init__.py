"""Ways to run an encoder other than plain torch: ONNX Runtime (``onnx.py``), and the torch-free query encoder
that ``sbert search`` uses on an index built with the ONNX backend (``onnx_query.py``)."""
