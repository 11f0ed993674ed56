"""The Celery workers: the app and its thin tasks, the clients each worker process builds, the
sweep that sends stalled jobs again, stored replies, the container probe file and the embedded
single-process mode."""
