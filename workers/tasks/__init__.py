"""Celery tasks, thin: validate the payload, call common, send the next step by name."""
