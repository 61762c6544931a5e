"""Training: the loop as events, recipes, runs and resume points, schedules, processes, evaluation."""
