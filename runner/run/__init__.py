"""Running an entry's container and listening to what it reports."""
