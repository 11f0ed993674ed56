import pytest

# The shared helpers assert too (a job that must end done, a command that must succeed): their
# failures read as a test's do. Registered before anything imports them.
pytest.register_assert_rewrite("tests.helpers")
