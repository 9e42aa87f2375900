"""Control-plane decisions driven by worker events (pure) and the loops that apply them."""
