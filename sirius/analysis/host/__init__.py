"""Host-program extraction: abstract interpretation of the host IR into a `HostProgram`."""
