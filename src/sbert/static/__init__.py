"""Static models beyond the ``StaticEmbedding`` module (``sbert.modules.static``): distilling one from any
model (``distill``) and ordering a model's coordinates for truncation (``rotate``)."""
