"""Spatial k-anonymity of a moving population: users table, shared partition, cloaker."""
