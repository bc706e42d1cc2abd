"""Project configuration: finding, reading and validating a Worker's Wrangler config."""

from .config import (
    ProjectConfig,
    WorkflowConfig,
    find_config,
    load_config,
    parse_var_option,
)
from .errors import ConfigError, Issue
from .files import CONFIG_FILE_NAMES

__all__ = [
    "CONFIG_FILE_NAMES",
    "ConfigError",
    "Issue",
    "ProjectConfig",
    "WorkflowConfig",
    "find_config",
    "load_config",
    "parse_var_option",
]
