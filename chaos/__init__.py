"""The fault soak: real services, scheduled kills and cuts, one verdict table."""
