//! Dataset statistics (see below).
