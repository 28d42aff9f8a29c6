"""Tests of kapiserver.testing: the fixtures users import or load (the pytest plugin)."""
