"""Fleets of simulated devices on a real broker with a real clock (see :mod:`.runner`)."""

from simulators.fleet.runner import FleetOptions, FleetResult, Progress, run_fleet, run_fleet_async

__all__ = ["FleetOptions", "FleetResult", "Progress", "run_fleet", "run_fleet_async"]
