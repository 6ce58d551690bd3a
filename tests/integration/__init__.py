import pytest

pytest.register_assert_rewrite("tests.integration.trace_check")  # its asserts explain their failures
