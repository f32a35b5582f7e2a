"""The one YAML file that describes a deployment, as a typed model
(:mod:`slackwise_config.model`) loaded and checked by :mod:`slackwise_config.loader`;
errors name the file, the key and the value."""

from slackwise_config.cores import CoreSettings
from slackwise_config.gpu import GpuSettings
from slackwise_config.hpa import HpaSettings
from slackwise_config.loader import load_config, parse_config, parse_modes
from slackwise_config.model import (
    ADVISOR_MODE,
    APP_EXPERIMENT_MODES,
    EXPERIMENT_MODES,
    PLATFORMS,
    VARIANTS,
    AdapterConfig,
    AppConfig,
    Config,
    ExperimentConfig,
    FunctionConfig,
    PlatformConfig,
    Resources,
    UpstreamConfig,
)
from slackwise_config.reader import ConfigError, Reader

__all__ = [
    "ADVISOR_MODE",
    "APP_EXPERIMENT_MODES",
    "EXPERIMENT_MODES",
    "PLATFORMS",
    "VARIANTS",
    "AdapterConfig",
    "AppConfig",
    "Config",
    "ConfigError",
    "CoreSettings",
    "ExperimentConfig",
    "FunctionConfig",
    "GpuSettings",
    "HpaSettings",
    "PlatformConfig",
    "Reader",
    "Resources",
    "UpstreamConfig",
    "load_config",
    "parse_config",
    "parse_modes",
]
