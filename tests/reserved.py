"""Members of the reserved parameter name families that are known to run code or change identity
(the families in ``dsched.names`` also cover names later versions of the tools add). Shared by
the unit tests of the reserved set and the acceptance test that tries every reserved name."""

from __future__ import annotations

KNOWN_DANGEROUS = (
    "BASH_ENV",  # sourced, after expansion, by every non-interactive bash
    "BASH_FUNC_ls",  # exported functions are BASH_FUNC_ls%% (outside the grammar anyway)
    "BASHOPTS",
    "BASH_XTRACEFD",
    "BASH_LOADABLES_PATH",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "GLIBC_TUNABLES",
    "MALLOC_CHECK_",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONWARNINGS",  # imports the module of a warning category
    "PYTHONHOME",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "SPARK_CONF_DIR",  # spark-env.sh is sourced by spark-submit
    "PYSPARK_PYTHON",
    "HADOOP_USER_NAME",  # any user under simple authentication
    "HADOOP_CONF_DIR",
    "KRB5CCNAME",
    "GIT_SSH_COMMAND",
    "GIT_CONFIG_COUNT",  # with GIT_CONFIG_KEY_0=core.fsmonitor: a command on `git status`
    "XDG_CONFIG_HOME",
    "DSCHED_FENCING_TOKEN",
    "DSCHED_TASK_NAME",
)
