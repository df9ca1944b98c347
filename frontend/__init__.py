"""polyc frontends: TC (``tc``), einsum (``einsum``), Python loops; each lowers to ``polyc.ir.Program``."""
