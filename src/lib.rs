//! dockwarden
