"""The one YAML file that describes a deployment, as a typed model
(:mod:`slackwise_core.config.model`) loaded and checked by :mod:`slackwise_core.config.loader`;
errors name the file, the key and the value."""

from slackwise_core.config.cores import CoreSettings
from slackwise_core.config.gpu import GpuSettings
from slackwise_core.config.hpa import HpaSettings
from slackwise_core.config.loader import load_config, parse_config, parse_modes
from slackwise_core.config.model import (
    ADVISOR_MODE,
    APP_EXPERIMENT_MODES,
    EXPERIMENT_MODES,
    LATE,
    MODES,
    PLATFORMS,
    STAGE_POLICIES,
    VARIANTS,
    AdapterConfig,
    AdvisorSettings,
    AIMDConfig,
    AppConfig,
    Config,
    ExperimentConfig,
    FunctionConfig,
    PlatformConfig,
    Resources,
    UpstreamConfig,
)
from slackwise_core.config.reader import ConfigError, Reader

__all__ = [
    "ADVISOR_MODE",
    "APP_EXPERIMENT_MODES",
    "EXPERIMENT_MODES",
    "LATE",
    "MODES",
    "PLATFORMS",
    "STAGE_POLICIES",
    "VARIANTS",
    "AIMDConfig",
    "AdapterConfig",
    "AdvisorSettings",
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
