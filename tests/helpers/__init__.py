"""What the tests share, one module a concern: test modules and conftest files import from here,
never from a conftest or from another test module (tests/unit/test_suite_layout.py checks it)."""
