"""Every request to an agent, assembled in one place: failures, history, evidence,
localization, the spectrum files it reads."""
