"""dpp's Hydra sweeper plugin (Hydra loads sweepers only from the ``hydra_plugins`` package)."""
