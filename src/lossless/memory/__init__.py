"""Long-term memory: facts, preferences, entities, events, cases and patterns an agent keeps.

Separate from the context engine; shares its store file and providers.  The
pieces: :mod:`~lossless.memory.records` (values), :mod:`~lossless.memory.ports`
(``MemoryStore``, ``Embedder``), :mod:`~lossless.memory.scopes` (reach),
:mod:`~lossless.memory.decay` (Weibull decay and tiers),
:mod:`~lossless.memory.vectors` (chunking, exact search),
:mod:`~lossless.memory.ranking` (the hybrid pipeline), :mod:`~lossless.memory.extraction`
(offline extractor and dedup decisions) and :mod:`~lossless.memory.service` (the facade).
"""
