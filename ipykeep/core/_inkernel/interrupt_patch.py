# In-kernel code (standard library only; sent as source, never imports ipykeep).
# PROTOCOL_VERSION = 1
#
# ipykernel 7 turns SIGINT into cancelling a running top-level ``await`` through
# ``IPythonKernel._cancel_on_sigint``, which schedules the cancellation on ``self.io_loop``;
# in ipykernel 7 that is not the loop running the cell, so ``await asyncio.sleep(60)`` never
# stops. This replaces the context manager with one that cancels the cell's future on the
# loop it runs in (thread-safe), leaving everything else as ipykernel does it. Everything is
# bound inside the function so nothing is left in the user's namespace.


def _ipk_install_interrupt_patch():
    import asyncio
    import signal
    from contextlib import contextmanager

    from IPython.core.getipython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    cls = type(kernel)
    if kernel is None or getattr(cls, "_ipykeep_sigint_patch", False) or not hasattr(cls, "_cancel_on_sigint"):
        return

    @contextmanager
    def _cancel_on_sigint(self, future):
        loop = asyncio.get_event_loop()

        def handle(*_args):
            loop.call_soon_threadsafe(lambda: future.done() or future.cancel())

        saved = signal.signal(signal.SIGINT, handle)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, saved)

    cls._cancel_on_sigint = _cancel_on_sigint
    cls._ipykeep_sigint_patch = True


_ipk_install_interrupt_patch()
del _ipk_install_interrupt_patch
