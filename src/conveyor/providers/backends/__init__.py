"""One module per ``[transcription] provider`` name, each holding its ``BACKEND``
(:class:`conveyor.providers.registry.ProviderBackend`); reached only through the registry."""

# The settings first: they find each backend's own section (SETTINGS) by importing the modules
# here, so a backend module imported before them is complete when they read it.
import conveyor.config  # noqa: F401
