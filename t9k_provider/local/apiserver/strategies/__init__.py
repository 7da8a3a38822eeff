"""One strategy per built-in resource (``registry.BUILTIN`` lists them), and the custom resources' one."""
