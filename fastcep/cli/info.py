"""``fastcep info FILE``: what a fastcep file holds, as ``fastcep.io.describe`` tells it."""

from ._common import out
from ._files import with_fix


def cmd_info(args):
    from ..io import NotFastcepFileError, describe

    try:
        fields, text = describe(args.file)
    except NotFastcepFileError as exc:  # (what the file is, and the command that takes it)
        raise with_fix(exc, args.file, None) from None
    out(args, fields, text)
    return 0
