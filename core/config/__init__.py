"""The one YAML file that describes a deployment, as a typed model (:mod:`core.config.model`)
loaded and checked by :mod:`core.config.loader`; errors name the file, the key and the value."""

from core.config.cores import CoreSettings
from core.config.gpu import GpuSettings
from core.config.loader import load_config, parse_config, parse_modes
from core.config.model import (
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
from core.config.reader import ConfigError, Reader

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
    "PlatformConfig",
    "Reader",
    "Resources",
    "UpstreamConfig",
    "load_config",
    "parse_config",
    "parse_modes",
]
