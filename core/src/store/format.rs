//! The on-disk record format. (Being written: see issue 4.)
