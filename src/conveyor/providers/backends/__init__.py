"""One module per ``[transcription] provider`` name, each holding its ``BACKEND``
(:class:`conveyor.providers.registry.ProviderBackend`); reached only through the registry."""
