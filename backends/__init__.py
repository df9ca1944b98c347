"""polyc backends: ``c`` (C99/OpenMP via cgen, built with the system compiler)."""
