"""The Train tab's wing: the recipe form, the run's jobs and guards, live curves, evaluations, attention forming."""
