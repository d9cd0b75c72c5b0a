"""The one kind of error every data format raises for input it cannot use (a file that
does not decode, a folder that does not pair, a setting the data contradicts): commands
catch :class:`DataError` and show its message, whichever format raised it."""


class DataError(ValueError):
    """Data that cannot be used as it is; the message names the file or setting and what
    to do."""


class ImageDataError(DataError):
    """An image, a mask or the list of them cannot be used as it is."""
