"""The Train tab's run document, its jobs and their wording, the settings' help."""
