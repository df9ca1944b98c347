"""polyc frontends: TC (``tc``) and einsum (``einsum``); each lowers to
``polyc.ir.Program``."""
