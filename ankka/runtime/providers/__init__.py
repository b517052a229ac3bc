"""The model seam and its adapters (see :mod:`ankka.runtime.providers.base`)."""
