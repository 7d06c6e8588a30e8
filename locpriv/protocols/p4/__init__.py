"""Protocol 4 (TTP-free): the device machine, its queries, responder and types (sans-I/O)."""
