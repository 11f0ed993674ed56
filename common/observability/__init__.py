"""What the system tells its operators: traces, logs and metrics."""
