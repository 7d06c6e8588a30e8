"""Simulated mobile-user fleets that drive and measure locpriv services."""
