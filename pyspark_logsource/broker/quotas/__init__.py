"""Client quotas (the seed's design §4.9): their configuration, resolution and enforcement."""
