"""What `rag serve` checks before it imports the heavy parts: each failure is one line,
`error: <file>: <field>: <what is wrong> — <fix>`, in well under a second."""
from __future__ import annotations

from rag_app.config import check_data_dir  # shared with the CLI's commands
from rag_app.core import ConfigError

LOOPBACK_BINDS = {"127.0.0.1", "localhost", "::1"}


def load_checked_settings():
    """Settings, or a ConfigError naming where the bad value came from and the variable to fix."""
    from rag_app.config import load_settings

    return load_settings()


def check_bind(host: str, settings, allow_remote: bool) -> None:
    if host not in LOOPBACK_BINDS and settings.api_token is None and not allow_remote:
        raise ConfigError(f"--host {host}: serving beyond this machine without RAG_API_TOKEN lets anyone who can "
                          "reach it ingest documents; set RAG_API_TOKEN, or pass --allow-remote to do it anyway")


def check_experiments(settings) -> None:
    from rag_app.experiments import ExperimentConfig

    cfg = ExperimentConfig.load(settings.experiments_file)
    if settings.experiment and settings.experiment not in cfg.experiments:
        raise ConfigError(f"{settings.experiments_file or 'environment'}: RAG_EXPERIMENT: {settings.experiment!r} "
                          f"is not an experiment there (have: {', '.join(cfg.experiments) or 'none'})")


def preflight(host: str, allow_remote: bool):
    """All cheap checks, in the order a user fixes them; returns the settings."""
    settings = load_checked_settings()
    check_bind(host, settings, allow_remote)
    check_data_dir(settings.data_dir)
    check_experiments(settings)
    return settings
