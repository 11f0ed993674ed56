"""AtomMem's runnable side: the command line now, the Celery workers on top of it."""
